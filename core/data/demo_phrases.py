"""The demo generator's phrase tables (data, not logic): desks, names, banks and apps, English and
Hinglish phrasebooks per desk, vague complaints, and the word-order twin patterns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

DESKS: tuple[str, ...] = ("UPI Dispute", "Card Fraud", "Loan Query", "KYC Update", "Other")

FIRST_NAMES = (
    "Rahul", "Priya", "Amit", "Sneha", "Vikram", "Anjali", "Suresh", "Kavita", "Arjun", "Deepa",
    "Mohammed", "Fatima", "Rohan", "Pooja", "Karthik", "Lakshmi", "Sandeep", "Neha", "Imran",
    "Meera", "Gurpreet", "Harpreet", "Ravi", "Sunita", "Aditya", "Divya", "Manoj", "Shalini",
    "Joseph", "Anita", "Venkatesh", "Farhan", "Nisha", "Abhishek", "Swati", "Rajesh", "Ayesha",
    "Pradeep", "Rekha", "Siddharth", "Tanvi", "Naveen", "Bhavna", "Kiran", "Salma", "Ritesh",
)  # fmt: skip

LAST_NAMES = (
    "Sharma", "Verma", "Patel", "Iyer", "Reddy", "Nair", "Singh", "Gupta", "Khan", "Das",
    "Mukherjee", "Kulkarni", "Joshi", "Menon", "Chatterjee", "Yadav", "Pillai", "Banerjee",
    "Shaikh", "Agarwal", "Rao", "Bose", "Mehta", "D'Souza", "Fernandes", "Gill", "Naidu",
    "Mishra", "Pandey", "Chauhan", "Hegde", "Kapoor",
)  # fmt: skip

BANKS = (
    "SBI", "State Bank of India", "HDFC Bank", "ICICI Bank", "ICICI", "Axis Bank", "Axis",
    "Kotak Mahindra Bank", "Kotak", "PNB", "Punjab National Bank", "Bank of Baroda",
    "Canara Bank", "Union Bank", "IDFC First Bank", "Yes Bank", "IndusInd Bank",
)  # fmt: skip

APPS = ("PhonePe", "Google Pay", "GPay", "Paytm", "BHIM", "Amazon Pay", "CRED", "BHIM UPI")
UPI_HANDLES = ("okaxis", "ybl", "paytm", "okhdfcbank", "oksbi", "okicici", "ibl", "axl", "upi")

MERCHANTS = (
    "Swiggy", "Zomato", "Amazon", "Flipkart", "Myntra", "BigBasket", "Reliance Digital", "Croma",
    "IRCTC", "MakeMyTrip", "BookMyShow", "Uber", "Ola", "DMart", "Nykaa", "Tata CLiQ", "Jio",
    "Airtel", "Apollo Pharmacy", "Blinkit", "Zepto", "a local kirana store", "an electronics shop",
    "a petrol pump", "a medical store",
)  # fmt: skip

CITIES = (
    "Mumbai", "Delhi", "Bengaluru", "Chennai", "Kolkata", "Hyderabad", "Pune", "Ahmedabad",
    "Jaipur", "Lucknow", "Kochi", "Indore", "Bhopal", "Patna", "Chandigarh", "Nagpur", "Surat",
    "Coimbatore", "Guwahati", "Bhubaneswar", "Visakhapatnam", "Noida", "Gurugram", "Thane",
    "Mysuru", "Vadodara", "Ludhiana", "Ranchi", "Dehradun", "Madurai",
)  # fmt: skip

LOAN_TYPES = (
    "home loan", "personal loan", "car loan", "two-wheeler loan", "education loan", "gold loan",
    "business loan", "consumer durable loan", "loan against property",
)  # fmt: skip

MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip

EN_CORES: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "I made a UPI payment of {amount} to {payee} on {date} using {app}. The money was debited "
        "from my {bank} account but the receiver has not got it. {upi_ref}.",
        "My UPI transaction failed on {date} but {amount} was deducted from my account {acct}. "
        "It has been {days} days and the amount is not reversed.",
        "I sent {amount} to the wrong UPI ID ({payee}) by mistake on {date}. Please help me get "
        "the money back.",
        "The UPI payment of {amount} to {merchant} is showing pending in {app} since {date}. The "
        "merchant says they did not receive anything.",
        "My UPI refund of {amount} from {merchant} has not been credited even though the "
        "merchant says it was processed on {date}. {upi_ref}.",
        "{amount} was debited twice for a single UPI payment to {merchant} on {date}. Please "
        "reverse the duplicate debit.",
        "I scanned a QR code at {merchant} in {city} and paid {amount} through {app}; the "
        "shopkeeper's phone did not show the payment but my account was debited.",
        "An autopay mandate that I never set up debited {amount} from my account through UPI on "
        "{date}. I want it cancelled and refunded.",
        "I accepted a collect request on {app} thinking I would receive money, but {amount} went "
        "out of my account instead. The request came from {payee}.",
        "My UPI PIN is correct but every payment fails with 'transaction declined by bank' since "
        "{date}, and one payment of {amount} still got debited.",
        "Money transferred to {payee} via UPI on {date} at {time} is not reflecting in the "
        "beneficiary's {bank2} account. {upi_ref}.",
        "I paid my electricity bill of {amount} using {app} and the bill still shows unpaid, but "
        "the money is gone from my {bank} account.",
        "UPI transaction with {upi_ref} dated {date} for {amount} is marked successful in my app "
        "but the beneficiary has not been credited.",
        "The {app} app shows the transaction as failed but my bank statement shows a debit of "
        "{amount} on {date}. Kindly refund.",
        "I tried paying {amount} to {merchant} through UPI three times and each time it failed, "
        "but two debits have appeared in my account {acct}.",
        "My UPI Lite balance of {amount2} disappeared after the {app} update on {date}.",
        "I raised a dispute in {app} for the failed UPI transfer of {amount} on {date} but it "
        "was closed without any refund.",
        "A stranger sent a UPI collect request and my father approved it; {amount} was lost from "
        "his {bank} account on {date}.",
        "UPI transfer of {amount} to my own account in {bank2} has not arrived although my "
        "{bank} account was debited on {date}.",
        "The reversal for my failed UPI payment was promised within 48 hours but it is now "
        "{days} days. {upi_ref}, amount {amount}.",
        "I paid {amount} to {payee} on {date}. The receiver's bank says it never arrived and my "
        "bank says it was successful. Please check with NPCI.",
        "While booking tickets on {merchant}, the UPI payment of {amount} was debited but the "
        "booking failed and no refund has come.",
        "My UPI ID {upi_id} got linked to the wrong bank account and a payment of {amount} was "
        "debited from my {bank2} account instead.",
        "Money I sent through {app} to my landlord ({payee}) on {date} went to some other account.",
        "The app said UPI limit exceeded on {date}, but the transaction of {amount} still got "
        "debited.",
        "A shopkeeper in {city} refused to hand over the goods saying the UPI payment of {amount} "
        "did not come, while my account {acct} shows the debit.",
        "The UPI mandate for my {merchant} subscription keeps debiting {amount2} every month "
        "even after I cancelled it on {date}.",
        "I transferred {amount} via UPI on {date}; the status is 'deemed approved' but the "
        "beneficiary has not been credited.",
        "Duplicate debit of {amount} on {date} for a UPI payment via {app}. Only one payment "
        "reached {payee}.",
        "I paid {amount} over UPI to {payee} for an online order that never arrived and the "
        "seller is not responding. Please raise a UPI dispute.",
        # Hard cases: another desk's words, UPI desk.
        "I paid my {loan_type} EMI of {emi} through {app} on {date}; the UPI debit happened but "
        "the loan account shows it unpaid. {upi_ref}.",
        "My KYC is complete, still {app} says the account is not verified, and the UPI payment "
        "of {amount} failed after the debit.",
        "I paid my credit card bill of {amount} by UPI on {date}; the money left my {bank} "
        "account but the card still shows the bill as unpaid. {upi_ref}.",
        "Money was debited but not received by the other side. Payment of {amount} on {date}, "
        "reference {utr}.",
    ),
    "Card Fraud": (
        "There is an unauthorised transaction of {amount} on my credit card {card} at "
        "{merchant} on {date}. I did not make this purchase.",
        "My debit card ending {last4} was used for {amount} online at {merchant} while the card "
        "was with me in {city}.",
        "I got a call from someone claiming to be from {bank} asking for my card CVV and OTP. "
        "After the call, {amount} was debited from my card {card}.",
        "Three international transactions totalling {amount} appeared on my card {card} on "
        "{date}. I have never travelled abroad and never shared my card details.",
        "I lost my wallet on {date} in {city} and before I could block the card, someone spent "
        "{amount} using contactless payments.",
        "Please block my card {card} immediately. I received an SMS for a transaction of "
        "{amount} that I did not do.",
        "I think my card was skimmed at a petrol pump in {city}. Since {date} there are small "
        "debits of {amount2} that I never authorised.",
        "My credit card was charged {amount} by {merchant} twice for one order on {date}. The "
        "merchant is not responding, please raise a chargeback.",
        "I disputed the fraudulent transaction of {amount} on card {card} on {date}, ticket "
        "{ticket}, but the bank has not given the temporary credit.",
        "Somebody added my card to an e-wallet and made purchases of {amount}. I never received "
        "any OTP for this.",
        "My card was blocked after a fraud alert on {date}, but the replacement card has not "
        "been delivered and I am stuck without a card.",
        "The {bank} fraud team blocked my card {card}, but the transaction of {amount} at "
        "{merchant} that triggered it is still in my statement.",
        "An ATM withdrawal of {amount} was made with my debit card in {city} on {date} at "
        "{time}, while I was in {city2}.",
        "A subscription I never signed up for is charging {amount2} every month to my credit "
        "card {card}.",
        "I clicked a link in a fake {bank} message about card reward points and immediately lost "
        "{amount} from my card.",
        "My virtual card from {bank} was used for {amount} on a gaming site on {date}. I have "
        "never used that card.",
        "Someone cloned my card. The physical card is with me but there is a swipe of {amount} "
        "at a jewellery shop in {city}.",
        "I got an OTP for a transaction of {amount} at {merchant} that I did not start, and the "
        "amount was debited before I could report it.",
        "My card {card} shows a cash advance of {amount} on {date} that I did not take. Please "
        "reverse it along with the charges.",
        "A fraudulent EMI conversion of {amount} was done on my credit card without my consent.",
        "{merchant} charged my card {amount} for a cancelled order and the refund never came "
        "back to the card.",
        "A caller offered me a credit limit increase; he knew my card number {card} and then "
        "{amount} was spent at {merchant}.",
        "A tap-to-pay transaction of {amount} happened on my card in a crowded metro in {city} "
        "on {date} without me paying anything.",
        "My card was declined at {merchant} with 'card blocked for suspicious activity', and "
        "then I saw {amount} spent that I do not recognise.",
        "The chargeback for the unauthorised transaction of {amount} on {date} was rejected "
        "saying I authenticated it, but I never got an OTP.",
        "Please hotlist my credit card {card}; it was stolen on {date} and I can see attempts "
        "at {merchant}.",
        "I see foreign currency charges of {amount} from an unknown website on my debit card "
        "statement for {date}.",
        "My credit card was used to buy gift cards worth {amount} on {date}. I did not buy any "
        "gift cards.",
        "A fake customer care number I found online asked me to share my screen; later {amount} "
        "was spent on my card {card}.",
        "Unknown merchant {merchant} has charged {amount} on my card on {date}. I want the "
        "charge reversed and a new card.",
        # Hard cases.
        "Someone called saying my KYC has expired and asked for the OTP; after that {amount} "
        "was spent on my card {card}.",
        "I got a message that my loan was approved and had to pay a processing fee; I paid "
        "{amount} by credit card and it turned out to be a fraud.",
        "Money was debited from my account without my knowledge on {date}, {amount}, at "
        "{merchant}. I did not do this.",
        "A payment of {amount} I never made shows on my statement for {date}; the SMS said it "
        "was at {merchant}.",
    ),
    "Loan Query": (
        "My {loan_type} EMI of {emi} was debited twice this month from my account {acct}. "
        "Please refund the extra EMI.",
        "The interest rate on my {loan_type} was increased from {rate} to {rate2} without any "
        "intimation.",
        "I closed my {loan_type} on {date} but I have still not received the NOC from {bank}.",
        "I made a part prepayment of {big_amount} on {date} but my EMI and tenure have not been "
        "revised.",
        "My CIBIL report shows my {loan_type} as overdue even though I paid every EMI on time. "
        "Please correct it.",
        "The disbursement of {big_amount} sanctioned on {date} has not been credited yet. The "
        "builder is asking for payment.",
        "Bounce charges of {small_amount} were levied on my loan account although my EMI was "
        "paid on time.",
        "I want to foreclose my {loan_type}. Please share the foreclosure statement and the "
        "charges applicable.",
        "Insurance of {amount} was added to my {loan_type} without my consent. Please remove it "
        "and refund the premium.",
        "Recovery agents from {bank} are calling me and my family at odd hours about an EMI that "
        "was already paid on {date}.",
        "My loan account {loan_acct} shows an outstanding of {big_amount} but by my calculation "
        "it should be much lower.",
        "The processing fee on my {loan_type} was {amount}, but I was told it would be waived at "
        "the time of sanction.",
        "I have not received my loan statement and interest certificate for tax filing. Loan "
        "account {loan_acct}.",
        "My EMI date was changed from the 5th to the 10th without my request and now I am being "
        "charged late fees.",
        "The interest subsidy on my son's education loan has not been credited for the last "
        "{months} months.",
        "My gold loan was closed on {date}, but the {city} branch has not returned the gold "
        "ornaments.",
        "I applied for a top-up on my home loan on {date} and there is no update for {days} days.",
        "The EMI on my {loan_type} went up to {emi} though the tenure was supposed to change, "
        "not the EMI.",
        "After the moratorium, interest on interest has been charged on my {loan_type}. Please "
        "explain the calculation.",
        "The original property documents for my closed home loan have not been returned even "
        "after {months} months.",
        "My personal loan was pre-closed but the auto debit of {emi} still continues every month.",
        "I paid the overdue EMI of {emi} in cash at the branch on {date} but the loan account "
        "still shows it unpaid.",
        "My loan application was rejected without any reason after I submitted all documents on "
        "{date}.",
        "The sanctioned amount of {big_amount} was reduced at disbursement without explanation.",
        "I need a revised repayment schedule for my {loan_type}; the one in the app shows "
        "{months} extra EMIs.",
        "A loan I never took, for {big_amount}, is showing in my credit report under {bank}. "
        "Please investigate.",
        "The floating rate on my home loan was not reduced even after the repo rate cut; I am "
        "still paying {rate2}.",
        "The hypothecation on my car's RC has not been removed even though the car loan was "
        "closed on {date}.",
        "Part payment of {big_amount} made on {date} was adjusted towards interest instead of "
        "principal.",
        "The {bank} app shows my EMI as {emi} but {emi2} is being deducted every month.",
        # Hard cases.
        "The EMI on the consumer durable loan I took on my credit card is being charged twice; "
        "{emi} on {date} and again on {date2}.",
        "My EMI is paid through a UPI autopay mandate, but the mandate failed and a bounce "
        "charge of {small_amount} was levied on the loan.",
        "Amount of {emi} was debited from my account on {date} and I do not know what it is "
        "for. I only have a {loan_type} with you.",
        "My KYC documents were collected at sanction; now the loan desk is asking again before "
        "releasing the second tranche of {big_amount}.",
    ),
    "KYC Update": (
        "My account {acct} has been frozen for pending KYC though I submitted my Aadhaar and "
        "PAN at the {city} branch on {date}.",
        "I completed video KYC on {date} but the status still shows 'KYC pending' in the {bank} "
        "app.",
        "Please update my address; I have moved to {city} and uploaded the new address proof on "
        "{date}.",
        "My PAN is not linked with my account and TDS is being deducted at a higher rate. I have "
        "submitted PAN {pan} twice.",
        "Re-KYC reminders keep coming even though I updated my KYC at the branch on {date}.",
        "My name is spelt differently in my Aadhaar and the bank records, so my KYC is getting "
        "rejected. Please correct it to {name}.",
        "I uploaded my documents for the KYC update {days} days ago but nobody has verified them.",
        "The branch is asking me to come in person for KYC though I am a senior citizen and "
        "cannot travel. Is there a doorstep option?",
        "My Aadhaar {aadhaar} is not getting seeded with my account; the app shows an error "
        "every time.",
        "The CKYC number is not being generated for my account and my mutual fund KYC is stuck "
        "because of that.",
        "My KYC was rejected saying the photo is not clear. I uploaded a fresh photograph on "
        "{date}.",
        "Credits to my account are blocked due to incomplete KYC; my salary of {amount} could "
        "not be credited.",
        "I want to update the mobile number linked to my account to {phone}; the old number is "
        "no longer with me.",
        "My date of birth is wrong in the bank records; please update it as per my PAN card.",
        "My minor account has to be converted to a regular account now that I am 18; which KYC "
        "documents are needed?",
        "The video KYC call got disconnected three times on {date} and now the app says I have "
        "used up my attempts.",
        "I am an NRI and need to update my overseas address and passport details for KYC.",
        "The bank marked my account as 'KYC non-compliant' even though the documents were "
        "verified last year.",
        "My e-KYC with Aadhaar OTP fails because the OTP goes to an old mobile number.",
        "The signature on my KYC form does not match the records and my cheque was returned; I "
        "want to update my signature.",
        "Please update my surname after marriage. My new name is {name}.",
        "My account was partially frozen on {date} for KYC and I cannot withdraw even {amount2} "
        "for medical expenses.",
        "I submitted Form 60 since I do not have a PAN yet, but the account is still restricted.",
        "Staff at the {city} branch refused to accept my voter ID as address proof for the KYC "
        "update.",
        "The KYC of my joint account holder is pending and the whole account is blocked because "
        "of it.",
        "The KYC update I did online on {date} has shown 'under review' for {days} days now.",
        "I got a notice to re-submit KYC within {days} days or account {acct} will be frozen; I "
        "already submitted everything on {date}.",
        "The Aadhaar biometric verification failed at the branch and they are not accepting any "
        "other document.",
        "My father passed away and I need the KYC of our joint account updated to my name only.",
        "Please update my email ID and PAN on the account; my Form 16 shows a mismatch.",
        # Hard cases.
        "My debit card stopped working because the account was frozen for KYC; please update my "
        "KYC, I submitted my PAN on {date}.",
        "UPI payments are failing because my account is on KYC hold; I have already uploaded "
        "my Aadhaar {aadhaar}.",
        "My loan disbursement is on hold because my KYC is not updated; please verify my "
        "Aadhaar {aadhaar}.",
        "I cannot do any transaction from account {acct} since {date}; the branch says some "
        "documents are pending.",
    ),
    "Other": (
        "I am unable to log in to net banking since {date}; it says my user ID is locked.",
        "I requested a cheque book on {date} but it has not been delivered to my {city} address.",
        "The staff at the {city} branch were rude and made me wait two hours for a simple "
        "passbook update.",
        "The ATM at {city} did not dispense cash but my account was debited {amount2} on {date}.",
        "Minimum balance charges of {small_amount} were deducted from my savings account though "
        "I maintained the balance.",
        "My FD of {big_amount} that matured on {date} has not been credited to my savings account.",
        "There is a very long queue at the ATM near {city} station every day because only one "
        "machine works.",
        "I am charged {small_amount} for SMS alerts that I never receive.",
        "My locker at the {city} branch could not be opened on {date} because the staff said the "
        "key register was missing.",
        "The interest on my savings account for the last quarter is lower than what was promised.",
        "I want to add a nominee to my account but the branch says the form is not available.",
        "The net banking OTP is not coming to my registered number, so I cannot make any online "
        "transfers.",
        "My account statement for {months} months has not been emailed even after several "
        "requests.",
        "The {city} branch was closed during working hours on {date} without any notice.",
        "I deposited a cheque of {amount} on {date} and it has not cleared after {days} days.",
        "The customer care number keeps me on hold for 40 minutes and then disconnects.",
        "My request to close my savings account, submitted on {date}, has not been processed.",
        "The passbook printing machine at the {city} branch has been out of order for weeks.",
        "{bank} debited {small_amount} as the annual fee for my debit card, which was "
        "supposed to be free for life.",
        "The cash deposit machine took {amount2} on {date} but did not credit my account.",
        "The demand draft of {amount} I requested on {date} has still not been issued.",
        "Net banking shows my balance wrongly since the system upgrade.",
        "My pension of {amount2} has not been credited this month.",
        "The {bank} mobile app crashes on login after the latest update.",
        "The branch manager refused to issue a balance certificate I need for my visa.",
        "The ATM swallowed my debit card at {city} on {date} and the branch is not returning it.",
        "The bank charged GST on a service I never asked for; the debit of {small_amount} on "
        "{date} is unexplained.",
        "Cash withdrawal at the branch counter took three hours because the server was down.",
        "I was asked to buy an insurance policy before my FD could be opened at the {city} branch.",
        "My stop payment request for cheque number {cheque} was not processed and the cheque "
        "got cleared.",
        # Hard cases.
        "Net banking and UPI both are not working since this morning; is the server down?",
        "I want to know the status of my complaint {ticket}; nobody has called me back since "
        "{date}.",
        "An amount of {small_amount} was debited on {date} with the narration 'charges'. What "
        "is this for?",
        "My new debit card PIN is not generating at the ATM and the branch says the card "
        "department will call; nobody called.",
    ),
}

EN_TERSE: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "upi failed money gone",
        "UPI payment failed but amount debited",
        "sent {amount} to wrong upi id, help",
        "upi txn pending since {date}",
        "refund not recieved for upi payment",
        "double debit on upi pls check",
        "{app} payment stuck, money cut",
        "UPI {utr} failed. refund?",
        "paid {payee}, not received by them",
        "upi autopay debited without permission",
    ),
    "Card Fraud": (
        "card fraud!! block my card",
        "unknown txn on my credit card",
        "someone used my card for {amount}",
        "didnt do this card transaction {card}",
        "block card {card} urgently",
        "card charged twice please reverse",
        "otp not shared, still card debited",
        "my card got cloned i think",
        "fraud txn {amount} at {merchant}",
        "stolen card being used, help",
    ),
    "Loan Query": (
        "emi deducted twice",
        "need NOC for closed loan",
        "why interest rate increased??",
        "loan statement needed urgently",
        "wrong emi bounce charge",
        "foreclosure amount for {loan_type} please",
        "loan disbursement delayed since {date}",
        "EMI {emi} debited twice",
        "{loan_type} closed, NOC pending",
        "prepayment not reflecting in loan",
    ),
    "KYC Update": (
        "kyc update pending since {date}",
        "account frozen, kyc already done",
        "please update my address",
        "pan not linked error",
        "video kyc keeps failing",
        "kyc rejected, why?",
        "re-kyc done still reminders",
        "aadhaar seeding failed again",
        "update mobile number {phone}",
        "KYC documents submitted, status?",
    ),
    "Other": (
        "net banking locked",
        "cheque book not received",
        "atm no cash but amount debited",
        "branch staff very rude",
        "app not opening since update",
        "passbook not updated",
        "FD not credited after maturity",
        "customer care not picking up",
        "locker not opening, staff clueless",
        "minimum balance charge wrong",
    ),
}

EN_DETAILS: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "The transaction reference is {upi_ref}.",
        "My UPI ID is {upi_id}.",
        "The receiver's UPI ID is {payee}.",
        "I have attached the screenshot from {app}.",
        "{app} support told me to contact my bank.",
        "The merchant has confirmed in writing that the amount was not received.",
        "That money was my rent for this month.",
        "My bank statement shows the debit on {date}.",
        "I have already waited the five working days mentioned in the app.",
        "The payment was made from my {bank} account {acct}.",
        "UTR number for your reference: {utr}.",
        "The {app} transaction ID is {utr} and it was paid to {payee}.",
        "I am attaching the bank SMS with {upi_ref}.",
    ),
    "Card Fraud": (
        "My card number is {card}.",
        "I have already blocked the card through the app.",
        "I never shared my OTP or PIN with anyone.",
        "The card was with me the whole time.",
        "Please issue a new card to my registered address.",
        "I have filed a complaint with the cyber cell in {city}.",
        "The SMS alert came at {time}.",
        "I want the {amount} credited back to my card.",
        "I have also reported it on the national cyber crime portal.",
        "My card limit is now almost used up because of this.",
        "The RRN in the SMS is {utr}.",
    ),
    "Loan Query": (
        "My loan account number is {loan_acct}.",
        "I have paid all EMIs on time for {months} months.",
        "The EMI is auto-debited from my account {acct}.",
        "Please share the updated amortisation schedule.",
        "This is affecting my credit score.",
        "I have the payment receipt dated {date}.",
        "The relationship manager is not answering my calls.",
        "The loan was sanctioned at the {city} branch.",
        "I need this sorted before I apply for another loan.",
    ),
    "KYC Update": (
        "I have uploaded my Aadhaar and PAN again.",
        "My customer ID is {cust_id}.",
        "The documents were submitted at the {city} branch.",
        "I got an SMS saying my KYC is under process.",
        "I cannot do any transactions until this is fixed.",
        "Please do not freeze my account; my salary comes into it.",
        "The PAN on file should end with {pan}.",
        "My Aadhaar number is {aadhaar}.",
    ),
    "Other": (
        "The branch staff told me to write to the head office.",
        "I have visited the branch three times.",
        "My customer ID is {cust_id}.",
        "Nobody has responded to my earlier email.",
        "This is very disappointing from a bank like {bank}.",
        "The branch is in {city}, near the main market.",
        "My account number is {acct}.",
    ),
}

EN_GENERIC_DETAILS = (
    "I complained earlier as well, ticket {ticket}, but nothing happened.",
    "I called customer care on {date2} and was told it would be resolved in 7 days.",
    "My registered mobile number is {phone}.",
    "This is the third time I am writing about this.",
    "Please call me back on {phone}.",
    "I have attached all the documents you asked for.",
    "Nobody at the branch could tell me what is going on.",
    "It has been more than a week and I still have no answer.",
    "I am losing patience with the way this has been handled.",
    "The chatbot only gives standard replies and closes the chat.",
)

EN_OPENERS = (
    "Dear Sir/Madam,",
    "Hi team,",
    "Hello,",
    "To the Branch Manager,",
    "Respected Sir,",
    "Dear {bank} Customer Care,",
    "Good morning,",
    "Sir,",
    "Hi,",
    "Dear Team,",
    "With reference to my account {acct},",
    "Subject: complaint regarding my account.",
)

EN_CLOSERS = (
    "Please resolve at the earliest.",
    "Regards, {name}",
    "Thanks and regards, {name}.",
    "Kindly look into this urgently.",
    "Awaiting your response.",
    "Please do the needful.",
    "Thank you.",
    "I hope this will be resolved soon.",
    "If this is not resolved I will escalate to the Banking Ombudsman.",
    "Please treat this as urgent.",
    "Yours faithfully, {name}",
    "{name}, {city}",
)

EN_CONTEXTS = (
    "I have been a {bank} customer for {years} years.",
    "I am a salaried employee in {city}.",
    "I am a senior citizen and not very comfortable with apps.",
    "My home branch is in {city}.",
    "I mostly use the mobile app for banking.",
    "I am writing on behalf of my mother.",
    "I run a small shop in {city}.",
    "I am a student and this is my only account.",
    "I was travelling to {city2} for work that week.",
    "I have a savings account and a salary account with {bank}.",
)

# Mentions of another desk's words that do not change the desk: real complaints wander.
EN_DISTRACTORS = (
    "My loan EMI from the same account is fine.",
    "My KYC was updated last year, so that is not the issue.",
    "I also have a credit card with you, which works fine.",
    "I use {app} for UPI regularly without problems.",
    "I visited the branch but they asked me to email.",
    "Net banking works normally.",
    "My card is with me and I have not lost it.",
    "There is no problem with my loan account.",
)

HI_CORES: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "Mera UPI payment fail ho gaya par paisa kat gaya. {amount} ka transaction tha, {date} ko.",
        "{app} se {amount} bheje the {payee} ko, lekin unko paisa nahi mila aur mere account se "
        "kat gaya hai.",
        "Galti se galat UPI ID pe {amount} transfer ho gaye, please paisa wapas dilwa dijiye.",
        "UPI transaction {date} se pending dikha raha hai, {upi_ref}. Paisa account se debit ho "
        "chuka hai.",
        "Merchant bol raha hai payment nahi aaya, par mera {amount} {app} se kat gaya.",
        "Ek hi payment ke liye do baar {amount} kat gaya UPI se, ek wapas karo please.",
        "Refund ka {amount} abhi tak account mein nahi aaya, {merchant} ne bola refund ho gaya "
        "hai.",
        "QR code scan karke {amount} pay kiya tha {city} mein, dukaandar ke paas nahi pahuncha.",
        "Maine koi autopay mandate nahi lagaya tha, phir bhi har mahine {amount2} UPI se kat "
        "raha hai.",
        "Galti se collect request approve kar diya, {amount} chala gaya. Ye fraud hai, UPI "
        "dispute raise karo.",
        "{app} mein transaction failed dikha raha hai lekin bank statement mein {amount} debit "
        "hai.",
        "Bijli ka bill {app} se bhara tha, {amount} kat gaya lekin bill abhi bhi unpaid dikha "
        "raha hai.",
        "UPI se apne hi dusre account mein {amount} bheje the, {days} din ho gaye, credit nahi "
        "hua.",
        "Reversal 48 ghante mein aana tha, ab {days} din ho gaye hain. {upi_ref}.",
        "Mera UPI kaam nahi kar raha, har baar 'declined by bank' aata hai aur ek baar {amount} "
        "kat bhi gaya.",
        "Landlord ko {payee} pe rent bheja tha {date} ko, unko mila hi nahi.",
    ),
    "Card Fraud": (
        "Card se unauthorized transaction hua hai, maine koi OTP share nahi kiya. {amount} "
        "{merchant} pe kharch hua.",
        "Mere credit card {card} se {amount} ka transaction hua jo maine nahi kiya. Card turant "
        "block karo.",
        "Kisi ne bank ke naam se call kiya aur CVV maang liya, uske baad card se {amount} kat "
        "gaya.",
        "Mera debit card mere paas hai phir bhi {city} mein ATM se {amount} nikal liye gaye.",
        "Card pe {amount} ka international transaction dikha raha hai, main kabhi bahar gaya hi "
        "nahi.",
        "Wallet kho gaya tha {date} ko, card block karne se pehle kisi ne {amount} ki shopping "
        "kar li.",
        "Mere card pe har mahine {amount2} ka subscription charge lag raha hai jo maine kabhi "
        "liya hi nahi.",
        "Fraud alert ke baad card block ho gaya, naya card abhi tak nahi aaya.",
        "Chargeback reject kar diya bola OTP se authenticate hua tha, par mujhe koi OTP aaya hi "
        "nahi tha.",
        "Petrol pump pe card swipe kiya tha, uske baad se card se chhote chhote debit ho rahe "
        "hain.",
        "Reward points wale fake link pe click kiya aur card se {amount} chale gaye.",
        "Card {card} pe {merchant} ne ek order ke liye do baar charge kiya hai. Please reverse "
        "karo.",
        "Mere card se {amount} ke gift cards kharide gaye, maine kuch nahi kharida.",
        "Metro mein tap karke {amount} ka payment ho gaya, maine card use hi nahi kiya tha.",
        "Customer care ka fake number mila tha online, unhone screen share karwaya aur card se "
        "{amount} gaye.",
    ),
    "Loan Query": (
        "Loan ki EMI do baar kat gayi is mahine, {emi} extra gaya hai. Wapas karo.",
        "Mera {loan_type} {date} ko band ho gaya par NOC abhi tak nahi mila.",
        "Bina bataye interest rate {rate} se {rate2} kar diya, ye galat hai.",
        "{big_amount} ka part payment kiya tha, par EMI ya tenure kuch kam nahi hua.",
        "Saari EMI time pe bhari hai phir bhi CIBIL mein overdue dikha raha hai.",
        "Loan {date} ko sanction ho gaya tha, disbursement abhi tak nahi hua.",
        "Recovery agent raat ko ghar pe call kar rahe hain, jabki EMI already bhar di hai.",
        "Loan ke saath {amount} ka insurance jod diya bina meri permission ke.",
        "EMI ke liye account mein balance tha phir bhi {small_amount} bounce charge laga diya.",
        "Gold loan close ho gaya par {city} branch se gehne abhi tak wapas nahi mile.",
        "Mujhe {loan_type} foreclose karna hai, statement aur charges bata dijiye.",
        "Loan band hone ke baad bhi har mahine {emi} auto debit ho raha hai.",
        "Loan close hue {months} mahine ho gaye, property ke original papers wapas nahi diye.",
        "EMI {emi} ki jagah {emi2} kat rahi hai, app mein alag dikha raha hai.",
        "Meri loan application bina reason ke reject kar di, saare documents diye the.",
    ),
    "KYC Update": (
        "Mera KYC update nahi ho raha, Aadhaar aur PAN dono {date} ko submit kar diye the.",
        "KYC pending bol ke account freeze kar diya, salary bhi credit nahi ho rahi.",
        "Video KYC teen baar disconnect ho gaya, ab app bol raha hai attempts khatam.",
        "Naya address update karna hai, main {city} shift ho gaya hoon. Address proof upload "
        "kar diya hai.",
        "PAN account se link nahi hua isliye TDS zyada kat raha hai.",
        "Aadhaar seeding ka error baar baar aa raha hai, please check karo.",
        "Branch wale bol rahe hain khud aake KYC karo, main senior citizen hoon, nahi aa sakta.",
        "Re-KYC ka message roz aa raha hai jabki maine {date} ko KYC kar diya tha.",
        "Mera naam Aadhaar mein alag aur bank mein alag hai, isliye KYC reject ho raha hai.",
        "Documents upload kiye {days} din ho gaye, abhi tak verify nahi hua.",
        "Mobile number change karna hai, purana number band ho gaya hai. Naya number {phone} hai.",
        "KYC ki wajah se account se paise nahi nikal pa raha, dawai ke liye {amount2} chahiye.",
        "Photo clear nahi hai bol ke KYC reject kar diya, nayi photo bhej di hai.",
        "Shaadi ke baad surname badalna hai, naya naam {name} hai.",
        "Mera debit card kaam nahi kar raha kyunki KYC hold laga hai, KYC update kar do.",
    ),
    "Other": (
        "Net banking login {date} se nahi ho raha, user ID lock bata raha hai.",
        "Cheque book ka request kiya tha, abhi tak ghar pe nahi aaya.",
        "Branch ka staff bahut rude tha, do ghante line mein khada rakha.",
        "ATM se cash nahi nikla par account se {amount2} kat gaya.",
        "Minimum balance maintain kiya tha phir bhi {small_amount} charge kat gaya.",
        "FD {date} ko mature ho gayi par paisa savings account mein nahi aaya.",
        "{city} branch mein passbook print karne wali machine kab se kharab hai.",
        "Customer care pe 40 minute hold pe rakha gaya, phir call kaat diya.",
        "Naya update aane ke baad se app login karte hi crash ho jata hai.",
        "{date} ko cheque jama kiya tha, {days} din ho gaye clear nahi hua.",
        "Locker nahi khul raha tha, staff bola key register nahi mil raha.",
        "SMS alert ke paise katte hain par SMS aata hi nahi.",
        "Branch working hours mein band thi, koi notice nahi tha.",
        "Account band karne ka form {date} ko diya tha, ab tak band nahi hua.",
        "Net banking aur UPI dono subah se nahi chal rahe, server down hai kya?",
    ),
}

HI_TERSE: dict[str, tuple[str, ...]] = {
    "UPI Dispute": (
        "upi fail ho gaya paisa kat gaya",
        "refund nahi aaya abhi tak",
        "galat upi id pe paisa chala gaya",
        "upi pending hai {date} se",
    ),
    "Card Fraud": (
        "card se paisa chala gaya, block karo",
        "card fraud hua hai mere saath",
        "mera card kisi ne use kiya hai",
        "card pe unknown charge hai",
    ),
    "Loan Query": (
        "emi do baar kat gayi",
        "noc nahi mila abhi tak",
        "loan ka interest badh gaya",
        "emi bounce charge galat hai",
    ),
    "KYC Update": (
        "kyc pending hai abhi tak",
        "kyc ho gaya phir bhi account freeze hai",
        "address update nahi hua",
        "pan link nahi ho raha",
    ),
    "Other": (
        "net banking nahi chal raha",
        "atm se cash nahi nikla",
        "cheque book nahi aayi",
        "branch staff ka behaviour kharab hai",
    ),
}

HI_DETAILS = (
    "Mera account number {acct} hai.",
    "Screenshot attach kar diya hai.",
    "Customer care ko call kiya tha, unhone bola 7 din mein ho jayega.",
    "Ye teesri baar complaint kar raha hoon.",
    "Ticket number {ticket} hai, koi reply nahi aaya.",
    "Bahut pareshani ho rahi hai.",
    "Mera registered mobile number {phone} hai.",
    "Branch gaya tha par wahan se bhi koi help nahi mili.",
    "Itne din ho gaye, koi jawab nahi aaya.",
    "Ghar ka kharcha isi account se chalta hai.",
    "Transaction ka reference {upi_ref} hai.",
    "Meri UPI ID {upi_id} hai.",
)

HI_OPENERS = ("Namaste,", "Sir,", "Hello sir,", "Hi team,", "Respected sir/madam,", "Dear sir,")

HI_CLOSERS = (
    "Jaldi solve karo please.",
    "Kripya jaldi madad karein.",
    "Dhanyavaad.",
    "Please help karo.",
    "Please jaldi dekh lijiye.",
    "Thank you, {name}",
)

HI_CONTEXTS = (
    "Main {years} saal se {bank} ka customer hoon.",
    "Main {city} mein rehta hoon aur meri home branch wahi hai.",
    "Main senior citizen hoon, app chalana zyada nahi aata.",
    "Meri mummy ki taraf se likh raha hoon.",
)

HI_DISTRACTORS = (
    "Mera loan ka EMI theek kat raha hai, wo problem nahi hai.",
    "KYC already update hai mera.",
    "Card bhi hai mere paas par usme koi dikkat nahi hai.",
    "UPI baaki sab jagah chal raha hai.",
)


@dataclass(frozen=True)
class Phrasebook:
    """Every phrase list for one language."""

    cores: Mapping[str, tuple[str, ...]]
    terse: Mapping[str, tuple[str, ...]]
    details: Mapping[str, tuple[str, ...]]
    generic_details: tuple[str, ...]
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    contexts: tuple[str, ...]
    distractors: tuple[str, ...]


PHRASEBOOKS: dict[str, Phrasebook] = {
    "en": Phrasebook(
        EN_CORES,
        EN_TERSE,
        EN_DETAILS,
        EN_GENERIC_DETAILS,
        EN_OPENERS,
        EN_CLOSERS,
        EN_CONTEXTS,
        EN_DISTRACTORS,
    ),
    "hi-en": Phrasebook(
        HI_CORES,
        HI_TERSE,
        {desk: () for desk in DESKS},
        HI_DETAILS,
        HI_OPENERS,
        HI_CLOSERS,
        HI_CONTEXTS,
        HI_DISTRACTORS,
    ),
}

# Underspecified complaints: the text fits several desks, and the desk it was routed to was
# decided by something the text does not say (the account it came from, an earlier ticket). They
# keep any model honest: the weights are how often each desk gets such a complaint.
_ALL_DESKS = dict.fromkeys(DESKS, 1.0)

VAGUE_CORES: dict[str, tuple[tuple[str, Mapping[str, float]], ...]] = {
    "en": (
        (
            "Amount of {amount} was debited from my account {acct} on {date} but the transaction "
            "failed. Please refund.",
            {"UPI Dispute": 5, "Card Fraud": 2, "Other": 2},
        ),
        (
            "There is a debit of {amount} on {date} that I do not recognise. Please check and "
            "reverse it.",
            {"Card Fraud": 5, "UPI Dispute": 3, "Loan Query": 1, "Other": 1},
        ),
        (
            "My account has been blocked since {date} and I cannot make any transactions.",
            {"KYC Update": 5, "Card Fraud": 2, "Other": 2},
        ),
        (
            "Refund of {amount} has not been received yet; it has been {days} days.",
            {"UPI Dispute": 5, "Card Fraud": 4},
        ),
        (
            "Charges of {small_amount} were deducted from my account on {date} without any "
            "information.",
            {"Other": 5, "Loan Query": 3, "Card Fraud": 2},
        ),
        (
            "Please update my details in the account; I submitted the documents on {date}.",
            {"KYC Update": 6, "Other": 2, "Loan Query": 1},
        ),
        (
            "Double debit of {amount} on {date}, kindly reverse the extra one.",
            {"UPI Dispute": 4, "Card Fraud": 3, "Loan Query": 3},
        ),
        ("Nobody is responding to my complaint {ticket} raised on {date}.", _ALL_DESKS),
        (
            "I got an OTP that I did not ask for and then {amount} was gone from my account.",
            {"Card Fraud": 5, "UPI Dispute": 4},
        ),
        (
            "The auto debit of {amount} failed on {date} but a penalty was still charged.",
            {"Loan Query": 5, "Other": 2, "UPI Dispute": 2},
        ),
        (
            "Money debited, not credited to the other side. {amount}, {date}.",
            {"UPI Dispute": 6, "Other": 2, "Card Fraud": 1},
        ),
        (
            "I want to know why {amount} was deducted from my account on {date}.",
            {"Loan Query": 3, "Other": 3, "Card Fraud": 2, "UPI Dispute": 2},
        ),
        (
            "My request submitted at the branch on {date} is still pending.",
            {"KYC Update": 4, "Other": 4, "Loan Query": 2},
        ),
        (
            "Transaction declined but amount deducted, {amount}.",
            {"UPI Dispute": 4, "Card Fraud": 4, "Other": 2},
        ),
        (
            "I was told my issue would be solved in 7 working days; it is now {days} days.",
            _ALL_DESKS,
        ),
        (
            "Please call me back about the deduction of {amount} on {date}; my number is {phone}.",
            {"UPI Dispute": 1, "Card Fraud": 1, "Loan Query": 1, "Other": 1},
        ),
    ),
    "hi-en": (
        (
            "Account se {amount} kat gaya par transaction fail ho gaya tha.",
            {"UPI Dispute": 5, "Card Fraud": 2, "Other": 2},
        ),
        (
            "Mera account {date} se block hai, koi transaction nahi ho raha.",
            {"KYC Update": 5, "Card Fraud": 2, "Other": 2},
        ),
        ("Refund abhi tak nahi aaya, {days} din ho gaye.", {"UPI Dispute": 5, "Card Fraud": 4}),
        (
            "Bina bataye {small_amount} ka charge kat gaya.",
            {"Other": 5, "Loan Query": 3, "Card Fraud": 2},
        ),
        ("Complaint {ticket} ka koi jawab nahi aaya abhi tak.", _ALL_DESKS),
        (
            "{amount} do baar kat gaya, ek wapas karo.",
            {"UPI Dispute": 4, "Card Fraud": 3, "Loan Query": 3},
        ),
        (
            "Ye {amount} kis cheez ka kata hai, samajh nahi aa raha.",
            {"Loan Query": 3, "Other": 3, "Card Fraud": 2, "UPI Dispute": 2},
        ),
    ),
}


@dataclass(frozen=True)
class SwapPattern:
    """Entity phrases trade places between roles {A}, {B} (and {C}); one role decides the desk."""

    template: str
    decisive: str  # the role ("A", "B" or "C") whose entity a reader routes the complaint by
    entities: Mapping[str, tuple[str, ...]]  # desk -> phrases that fit every role
    size: int = 2
    language: str = "en"


@dataclass(frozen=True)
class FixedPattern:
    """Members written out in full (a moved negation); slots are shared by all members."""

    members: tuple[tuple[str, str], ...]  # (template, desk)
    language: str = "en"


_UPI, _CARD, _LOAN, _KYC, _OTHER = DESKS

TWIN_PATTERNS: tuple[SwapPattern | FixedPattern, ...] = (
    SwapPattern(
        "I paid {amount} to {merchant} on {date} by {A}, not by {B}, and was charged twice.",
        "A",
        {_UPI: ("UPI", "{app} UPI"), _CARD: ("card", "credit card", "debit card")},
    ),
    SwapPattern(
        "I entered my PIN only for the {A} payment, not for the {B} payment of {amount} at "
        "{merchant} on {date}.",
        "B",
        {_UPI: ("UPI",), _CARD: ("card", "credit card")},
    ),
    SwapPattern(
        "My {A} is not the problem; my {B} was put on hold by {bank} on {date}. Please sort it "
        "out.",
        "B",
        {_CARD: ("debit card", "credit card"), _KYC: ("KYC", "KYC status"), _UPI: ("UPI ID",)},
    ),
    SwapPattern(
        "I received the {A} but not the {B}, even though {bank} confirmed both on {date}.",
        "B",
        {
            _UPI: ("UPI refund of {amount}", "UPI reversal"),
            _LOAN: ("loan closure NOC", "loan interest certificate"),
            _CARD: ("chargeback credit for the card fraud",),
            _OTHER: ("new cheque book", "FD maturity amount"),
            _KYC: ("KYC verification confirmation",),
        },
    ),
    SwapPattern(
        "The {A} team at {bank} told me to contact the {B} team about the {amount} debit on "
        "{date}.",
        "B",
        {_UPI: ("UPI",), _CARD: ("card fraud",), _LOAN: ("loan",), _KYC: ("KYC",)},
    ),
    SwapPattern(
        "I asked the {city} branch for help with my {A}, but they only talked about my {B}.",
        "A",
        {
            _UPI: ("failed UPI payment", "UPI refund"),
            _CARD: ("stolen credit card", "card fraud complaint"),
            _LOAN: ("home loan EMI", "loan foreclosure"),
            _KYC: ("pending KYC", "address update for KYC"),
            _OTHER: ("net banking login", "cheque book request"),
        },
    ),
    SwapPattern(
        "After the {A} problem was fixed on {date}, a new {B} problem started and nobody is "
        "helping.",
        "B",
        {
            _UPI: ("UPI payment",),
            _CARD: ("card fraud",),
            _LOAN: ("loan EMI",),
            _KYC: ("KYC",),
            _OTHER: ("net banking",),
        },
    ),
    SwapPattern(
        "Not my {A}, not my {B}: it is my {C} that has had a problem since {date}.",
        "C",
        {
            _UPI: ("UPI ID",),
            _CARD: ("credit card",),
            _LOAN: ("loan account",),
            _KYC: ("KYC",),
            _OTHER: ("cheque book",),
        },
        size=3,
    ),
    SwapPattern(
        "Please fix my {A} first; the {B} can wait until next week. Account {acct}.",
        "A",
        {
            _UPI: ("UPI refund of {amount}",),
            _CARD: ("blocked credit card after the fraud",),
            _LOAN: ("loan statement",),
            _KYC: ("KYC update",),
            _OTHER: ("cheque book request",),
        },
    ),
    SwapPattern(
        "My {A} complaint is still open, the {B} one was closed on {date}. Ticket {ticket}.",
        "A",
        {
            _UPI: ("UPI refund",),
            _CARD: ("card fraud",),
            _LOAN: ("loan EMI",),
            _KYC: ("KYC update",),
            _OTHER: ("ATM cash",),
        },
    ),
    SwapPattern(
        "Mera {A} block nahi hua, {B} block hua hai {date} se. {bank} se koi jawab nahi aaya.",
        "B",
        {_CARD: ("card",), _KYC: ("KYC",), _UPI: ("UPI ID",), _OTHER: ("net banking",)},
        language="hi-en",
    ),
    SwapPattern(
        "{A} ki problem nahi hai, problem {B} ki hai. {bank} ne {date} se kuch nahi kiya.",
        "B",
        {
            _UPI: ("UPI refund",),
            _LOAN: ("loan EMI",),
            _KYC: ("KYC",),
            _CARD: ("card fraud",),
            _OTHER: ("cheque book",),
        },
        language="hi-en",
    ),
    FixedPattern(
        (
            (
                "I did not authorise the card payment of {amount} at {merchant}; the UPI transfer "
                "on {date} I did authorise.",
                _CARD,
            ),
            (
                "I did authorise the card payment of {amount} at {merchant}; the UPI transfer on "
                "{date} I did not authorise.",
                _UPI,
            ),
        )
    ),
    FixedPattern(
        (
            (
                "My loan application at {bank} is approved but my KYC verification is not "
                "complete, as of {date}.",
                _KYC,
            ),
            (
                "My loan application at {bank} is not approved but my KYC verification is "
                "complete, as of {date}.",
                _LOAN,
            ),
        )
    ),
    FixedPattern(
        (
            (
                "My EMI auto-debit of {emi} did go through on {date} but the UPI refund of "
                "{amount} did not.",
                _UPI,
            ),
            (
                "My EMI auto-debit of {emi} did not go through on {date} but the UPI refund of "
                "{amount} did.",
                _LOAN,
            ),
        )
    ),
    FixedPattern(
        (
            (
                "At the {city} branch my cheque book request is done but my KYC update is not.",
                _KYC,
            ),
            (
                "At the {city} branch my cheque book request is not done but my KYC update is.",
                _OTHER,
            ),
        )
    ),
    FixedPattern(
        (
            (
                "The card transaction of {amount} at {merchant} was genuine; the UPI one on "
                "{date} was not.",
                _UPI,
            ),
            (
                "The card transaction of {amount} at {merchant} was not genuine; the UPI one on "
                "{date} was.",
                _CARD,
            ),
        )
    ),
    FixedPattern(
        (
            (
                "The {amount} charge on my credit card is known to me; the loan EMI debit of "
                "{emi} on {date} is not.",
                _LOAN,
            ),
            (
                "The {amount} charge on my credit card is not known to me; the loan EMI debit of "
                "{emi} on {date} is.",
                _CARD,
            ),
        )
    ),
    FixedPattern(
        (
            ("Since {date} net banking is working but UPI is not, on my {bank} account.", _UPI),
            ("Since {date} net banking is not working but UPI is, on my {bank} account.", _OTHER),
        )
    ),
    FixedPattern(
        (
            (
                "{date} ko card wala transaction {amount} ka maine kiya tha, UPI wala nahi kiya.",
                _UPI,
            ),
            (
                "{date} ko card wala transaction {amount} ka maine nahi kiya tha, UPI wala kiya.",
                _CARD,
            ),
        ),
        language="hi-en",
    ),
    FixedPattern(
        (
            ("Mera loan approve ho gaya hai, KYC verify nahi hua hai. {bank}, {city}.", _KYC),
            ("Mera loan approve nahi hua hai, KYC verify ho gaya hai. {bank}, {city}.", _LOAN),
        ),
        language="hi-en",
    ),
)

REPHRASINGS = {  # whole-phrase swaps that keep the sense, each tried once per English text
    "debited": ("deducted", "taken"),
    "deducted": ("debited", "cut"),
    "please": ("kindly", "pls"),
    "Please": ("Kindly", "Pls"),
    "immediately": ("urgently", "right away"),
    "account": ("a/c", "acct"),
    "transaction": ("txn",),
    "did not": ("didn't",),
    "I have": ("I've",),
    "customer care": ("customer support", "the helpline"),
    "money": ("amount", "funds"),
}

MISSPELLINGS = {
    "received": "recieved",
    "amount": "amout",
    "account": "acount",
    "please": "pls",
    "transaction": "transcation",
    "immediately": "immediatly",
    "deducted": "deductd",
    "refund": "refnd",
    "because": "becuase",
    "money": "mony",
    "payment": "paymnet",
    "already": "allready",
    "credited": "creditted",
    "debited": "debitted",
    "still": "stil",
    "update": "updte",
}
